package olio

// Word lists of the generator. Changing them changes the data: bump
// GeneratorVersion.
var (
	firstNames = []string{"Ada", "Alan", "Barbara", "Brian", "Carla", "Chen", "Dana", "David", "Elena", "Emil",
		"Fatima", "Felix", "Grace", "Gustav", "Hana", "Hugo", "Ines", "Ivan", "Julia", "Jonas", "Kara", "Karl",
		"Lena", "Luis", "Maria", "Marek", "Nadia", "Nils", "Olga", "Omar", "Paula", "Pedro", "Rosa", "Rui",
		"Sara", "Sven", "Tara", "Tomas", "Uma", "Victor", "Wanda", "Yusuf", "Zoe"}
	lastNames = []string{"Almeida", "Bauer", "Castro", "Dubois", "Eriksson", "Fischer", "Garcia", "Hansen",
		"Ito", "Jensen", "Kowalski", "Larsen", "Moreau", "Nakamura", "Olsen", "Petrov", "Quinn", "Rossi",
		"Schmidt", "Tanaka", "Ueda", "Vargas", "Weber", "Xu", "Yilmaz", "Zhang", "Novak", "Horvat", "Silva"}
	streets = []string{"Main St", "Oak Ave", "Pine Rd", "Maple Dr", "Cedar Ln", "Elm St", "Lake View",
		"Hill Rd", "Park Ave", "River Rd", "Sunset Blvd", "Mill Ln", "Church St", "Station Rd", "High St"}
	cities = []string{"Springfield", "Riverton", "Lakewood", "Fairview", "Georgetown", "Salem", "Franklin",
		"Greenville", "Bristol", "Clinton", "Madison", "Oakland", "Ashland", "Burlington", "Dover"}
	states    = []string{"CA", "NY", "TX", "WA", "OR", "MA", "IL", "CO", "FL", "GA", "NC", "AZ", "MN", "OH", "PA"}
	countries = []string{"USA", "USA", "USA", "USA", "Canada", "Mexico", "UK", "Germany", "France", "Japan", "India", "Brazil"}
	timezones = []string{"America/Los_Angeles", "America/Denver", "America/Chicago", "America/New_York",
		"Europe/London", "Europe/Berlin", "Asia/Tokyo", "Asia/Kolkata", "America/Sao_Paulo"}
	loremWords = []string{"lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed",
		"do", "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim",
		"ad", "minim", "veniam", "quis", "nostrud", "exercitation", "ullamco", "laboris", "nisi", "aliquip",
		"ex", "ea", "commodo", "consequat", "duis", "aute", "irure", "in", "reprehenderit", "voluptate",
		"velit", "esse", "cillum", "fugiat", "nulla", "pariatur", "excepteur", "sint", "occaecat",
		"cupidatat", "non", "proident", "sunt", "culpa", "qui", "officia", "deserunt", "mollit", "anim",
		"id", "est", "laborum", "concert", "picnic", "meetup", "festival", "workshop", "party", "lecture",
		"market", "race", "tour", "exhibition", "tasting", "game", "club", "community", "music", "art"}
)
